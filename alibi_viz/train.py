"""`python -m alibi_viz.train`, the command that the shipped model cards, the results files
and the Makefile record. It trains the shipped model family:
alibi_viz/experiments/train.py, which nothing in the library or the app imports."""

if __name__ == "__main__":
    import runpy  # the program by name: this alias imports nothing at its top

    runpy.run_module("alibi_viz.experiments.train", run_name="__main__")
