"""Side-by-side measurements. Every benchmark runs its baseline in the same process and
prints a table with the ratio, so figures are comparable on whatever machine runs them."""
