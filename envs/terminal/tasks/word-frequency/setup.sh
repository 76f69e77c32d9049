#!/bin/bash
set -e
cat > corpus.txt <<'TEXT'
The lighthouse keeper counted the ships. The ships came late, and the keeper
did not sleep. "Ships, ships!" shouted the Keeper's daughter; the gulls didn't care.
A gull is a bird; a bird is not a ship. The keeper wrote it down, and wrote it again.
Late ships, late gulls, late letters: the keeper's log was a list of late things.
TEXT
