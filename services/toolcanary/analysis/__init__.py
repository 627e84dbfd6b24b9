"""Analysis service: `make_figures` turns bfcl_by_category.csv and train_metrics.csv into the headline table,
the findings, their statistics and figures f1-f4.

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table --findings --fig all
"""
