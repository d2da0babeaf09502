"""Where the repository's files are, for every test folder alike."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_PATH = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"
PROCESSES_PATH = ROOT / "walkthroughs" / "processes.toml"
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"
