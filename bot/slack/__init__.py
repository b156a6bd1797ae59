"""The Slack front end, one concern per module: see ``bot/slack/app.py`` for the map."""
