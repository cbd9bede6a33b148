"""The programs that train, measure and write assets/ (minGPT's `projects/`): one command each,
run from the checkout's root (`python -m experiments.train`, ...). They import the library as
an installed package; nothing in the library or the app imports them, and the wheel leaves
them out."""
