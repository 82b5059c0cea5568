"""The mutation engine as it was before mutators wrote through a copy-on-write draft: each
request's object cloned whole, mutators editing the clone, a full diff for the patch. The
modules the change touched are kept verbatim (resources and context, which it only extended,
are the live ones), as the reference that the property tests hold the new engine to."""
