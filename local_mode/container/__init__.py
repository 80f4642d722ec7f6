"""What the training container does on each local host: its /opt/ml layout, the environment the sagemaker-training
toolkit gives a script, the processes the toolkit's launcher starts for a distribution and their process group,
torchrun's report of a failed worker, and the container profiles' Python environments (like the AWS PyTorch images').

May import: `local_mode.aws`.
"""
