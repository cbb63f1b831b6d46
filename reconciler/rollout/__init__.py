"""Stages: bake, alarms, promotion and rollback."""
