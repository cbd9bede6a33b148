"""`python -m alibi_viz.reach`, the command that the shipped model cards, the results files
and the Makefile record. It measures context reach and copy at a distance:
alibi_viz/experiments/reach.py, which nothing in the library or the app imports."""

if __name__ == "__main__":
    import runpy  # the program by name: this alias imports nothing at its top

    runpy.run_module("alibi_viz.experiments.reach", run_name="__main__")
