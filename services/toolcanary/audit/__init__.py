"""The contamination audit: how close training came to each BFCL item, and what the audit cannot see.

    python -m toolcanary.audit --run RUN [--library PATH]

See docs/audit.md for the measures, thresholds and outputs.
"""
