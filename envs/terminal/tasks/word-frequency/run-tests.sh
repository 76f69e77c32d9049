#!/bin/bash
# Terminal-Bench's entry point. gem-sandbox runs tests/ under its own pytest runner instead, so
# that no text the tests print can become the verdict.
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA
