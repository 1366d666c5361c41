"""One grasp attempt as physics (paper Sec. V-A): :mod:`.attempt` plans the approach, close
and lift of an attempt from the pieces :mod:`.approach` (hand sweep, impacts, landing),
:mod:`.contact` (where the fingers meet the target) and :mod:`.grip` (close and lift), on the
state of :mod:`.bodies` (an object with its geometry, one attempt's noise draws).
"""
