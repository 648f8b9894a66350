"""http/routes"""
