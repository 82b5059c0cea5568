"""Pure mutation: matchers choose a policy, mutators edit a copy of the object, the diff is the patch."""
