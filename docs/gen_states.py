"""Print the job state diagram (Mermaid) generated from ``backwave_django.core.states.TRANSITIONS``.

    python docs/gen_states.py            # the Mermaid block pasted into docs/explanation/states.md
    python docs/gen_states.py --table    # the same transitions as a Markdown table

It imports only the pure Core, so it needs no Django settings and no database.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backwave_django.core.states import INITIAL_STATES, TERMINAL_STATES, TRANSITIONS, State


def mermaid() -> str:
    lines = ["```mermaid", "stateDiagram-v2", "    classDef terminal font-weight:bold,stroke-width:3px"]
    for state in State:
        if state in INITIAL_STATES:
            lines.append(f"    [*] --> {state.value}: enqueue")
    for (before, after), who in TRANSITIONS.items():
        lines.append(f"    {before.value} --> {after.value}: {who}")
    for state in State:
        if state in TERMINAL_STATES:
            lines.append(f"    class {state.value} terminal")
    lines.append("```")
    return "\n".join(lines)


def table() -> str:
    lines = ["| from | to | when |", "| --- | --- | --- |"]
    for (before, after), who in TRANSITIONS.items():
        lines.append(f"| `{before.value}` | `{after.value}` | {who} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table() if "--table" in sys.argv[1:] else mermaid())
