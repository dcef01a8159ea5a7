"""Judging: a submission's plan, the verdicts from what its container reported, comparisons, the
data set layouts read into submissions, and scoring a data set with pass@k."""
