"""Analysis service: `make_figures` turns bfcl_by_category.csv and train_metrics.csv into the headline table,
the findings, their statistics and figures f1-f4; with the trainer's episode records, also what the simulator
trained on (tables, findings and figure f5).

    .venvs/analysis/bin/make_figures --data volumes/results/RUN --table --findings --fig all
"""
