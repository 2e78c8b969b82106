"""stream package."""
