"""What the task reads at run time: dense feature files and the multi-input dataset."""
