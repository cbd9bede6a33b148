"""`python -m alibi_viz.evaluate`, the command that the shipped model cards, the results files
and the Makefile record. It measures the shipped models' perplexity from 128 to 4,096 tokens:
alibi_viz/experiments/evaluate.py, which nothing in the library or the app imports."""

if __name__ == "__main__":
    import runpy  # the program by name: this alias imports nothing at its top

    runpy.run_module("alibi_viz.experiments.evaluate", run_name="__main__")
