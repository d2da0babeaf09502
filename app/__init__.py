"""GRPO walkthrough: an interactive, server-computed walkthrough of GRPO."""
