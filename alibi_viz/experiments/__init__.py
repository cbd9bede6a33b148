"""The programs that train, measure and write assets/ (minGPT's `projects/`): they use the
library below them, and nothing in the library or the app imports them."""
