"""The reference ranking model: a client of sagemaker_distributed, trained by train_ddp.py and train_lightning.py."""
