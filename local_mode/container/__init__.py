"""What the training container does on each local host: its /opt/ml layout, the environment the sagemaker-training
toolkit gives a script, the processes the toolkit's launcher starts for a distribution, or in its place a request's
ContainerEntrypoint (SDK v3 ModelTrainer's drivers) run with the host's folder as /opt/ml in a network of the job's
own (a port of the machine's loopback, such as a tracking server's, relayed into it), and their process group,
torchrun's report of a failed worker, and the container profiles' Python environments (like the AWS PyTorch images').

May import: `local_mode.aws`.
"""
