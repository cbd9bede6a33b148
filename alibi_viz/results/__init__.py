"""What the experiments found, read back from assets/results/*.json, and the sentences written
from it: plain Python and numpy, no torch (a page that only reads results loads no model)."""
