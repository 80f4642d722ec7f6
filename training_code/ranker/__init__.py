"""Ranking model training shared by train_lightning.py and train_ddp.py."""
