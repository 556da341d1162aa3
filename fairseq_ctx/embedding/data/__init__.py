"""What the task reads at run time: the shared dictionary, the pair dataset, and the binarization
of multilingual text with one dictionary."""
