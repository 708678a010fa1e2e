"""One module per architecture family: its timm builder, the fields it accepts, and its κ definition."""
