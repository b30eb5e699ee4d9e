"""Helpers shared by the sample training programs; each image copies this package."""
