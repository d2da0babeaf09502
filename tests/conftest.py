import sys
from pathlib import Path

# tests import their own helpers (grpo_reference) by module name
sys.path.insert(0, str(Path(__file__).parent))
