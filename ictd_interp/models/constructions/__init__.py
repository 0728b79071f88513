"""Hand-built weights, each a small pure function with its derivation: θ* (``theta_star``), θ*'s circuit in a
standard block (``standard_theta_star``) and the predecessor's linear TD and control constructions
(``linear_td``, ``linear_control``). Imports ``config``, ``tasks`` and the rest of ``models``."""
