"""Backfill: long-waiting pods and gangs reserve their earliest start; others fill the gaps."""
