"""The evaluation harness: benchmark datasets, the eval run (``harness``), its records, reports and comparisons."""
