"""Quality control for the report: statistics, figures and library tables."""
