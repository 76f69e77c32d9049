#!/bin/bash
set -e
cat > sales.csv <<'CSV'
region,product,units,unit_price
north,widget,10,2.50
south,widget,4,2.50
north,gadget,3,10.00
east,gizmo,7,1.25
south,gadget,,10.00
east,widget,6,2.40
north,gizmo,13,1.25
west,gadget,2,abc
south,gizmo,1,1.30
CSV
