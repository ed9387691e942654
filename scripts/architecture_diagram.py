"""Regenerate the room-and-layer diagram of docs/architecture.md from the code's imports.

    .venv/bin/python scripts/architecture_diagram.py
"""

from workbench.testing.architecture import update_doc

if __name__ == "__main__":
    print("diagram was current" if update_doc() else "diagram updated: docs/architecture.md")
