"""The standard pre-LN transformer: the hooked model (``model``), TransformerLens's weight processing
(``weights``) and θ*'s circuit written into a standard block (``theta_star``, read against the stylised model).
Imports ``config``, ``tasks`` and the rest of ``models``."""
