"""Builders of the objects tests feed kubetrain (job manifests, loaded jobs, pods), one
package for every tier: a test asks for what it needs by keyword instead of writing the
manifest out again."""
