package subgroup_info

import "encoding/json"

// MarshalJSON: a dump of the tree for the conformance generator (not part of KAI).
func (sgs *SubGroupSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"Name":        sgs.name,
		"MinSubGroup": sgs.minSubGroup,
		"Constraint":  sgs.topologyConstraint,
		"Groups":      sgs.groups,
		"PodSets":     sgs.podSets,
	})
}

func (ps *PodSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"Name":         ps.name,
		"MinAvailable": ps.minAvailable,
		"Constraint":   ps.topologyConstraint,
	})
}
