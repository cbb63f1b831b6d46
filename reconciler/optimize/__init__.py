"""The optimizer: levers and search space, pre-screen, study, trials on trial GPUs, candidates."""
