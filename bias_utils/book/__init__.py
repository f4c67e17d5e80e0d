"""book"""

__all__: list[str] = []
