"""Merge the four package branches (schedules, memory, runs, maintenance) into one head.

The packages grew their tables in parallel, each on a branch from 0001; from here
on migrations are linear again.

Revision ID: 0003
Revises: 0002_maintenance, 0002_memory, 0002_runs, 0002_schedules
Create Date: 2026-12-02
"""

from __future__ import annotations

revision = "0003"
down_revision = ("0002_maintenance", "0002_memory", "0002_runs", "0002_schedules")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
