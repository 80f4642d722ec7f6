"""What both loops share: the session around a run, the training step and evaluation, checkpoints, the meter, plots."""
