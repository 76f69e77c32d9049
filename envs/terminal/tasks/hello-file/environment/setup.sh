#!/bin/bash
# Nothing to prepare: the work dir starts empty.
true
