"""`python -m alibi_viz.snapshots`, the command that the shipped model cards, the results files
and the Makefile record. It measures the shipped model's training snapshots:
alibi_viz/experiments/snapshots.py, which nothing in the library or the app imports."""

if __name__ == "__main__":
    import runpy  # the program by name: this alias imports nothing at its top

    runpy.run_module("alibi_viz.experiments.snapshots", run_name="__main__")
