# How a cached step (a Go tool, the Horovod wheel, the OpenAPI documents, the cdk8s CLI)
# writes its directory under $(KUBETRAIN_CACHE), so that two runs sharing the cache (two
# checkouts' `make test` at once) never break each other: each make builds into a private
# directory named after its own pid, and publishes it with one rename(2) onto the final
# name, which fails while another run's complete copy is there (its copy is then kept and
# ours dropped). A reader sees the final directory complete, .done included, or not at
# all. Included by the top-level Makefile first.
#
#   $(DIR)/.done:
#   	$(call cache_begin,$(DIR))
#   	@build into $(call cache_partial,$(DIR))
#   	$(call cache_publish,$(DIR))

# The pid of this make (the parent of the shell $(shell) starts): unique among the makes
# running at once, and how a later run tells a dead run's leftovers from a live run's.
CACHE_RUN := $(shell echo $$PPID)

# This run's private build directory for DIR is DIR$(CACHE_PARTIAL).
CACHE_PARTIAL := .partial-$(CACHE_RUN)
cache_partial = $(1)$(CACHE_PARTIAL)

# Start building DIR: drop the leftovers of runs that died midway (their make is gone), and
# make this run's private directory, empty.
define cache_begin
@for stale in $(1).partial-*; do \
  [ -e "$$stale" ] || continue; \
  kill -0 "$${stale##*.partial-}" 2>/dev/null || rm -rf "$$stale"; \
done
@rm -rf $(call cache_partial,$(1)) && mkdir -p $(call cache_partial,$(1))
endef

# Publish this run's build of DIR, complete (.done written first), in one rename; when
# another run published it meanwhile, keep that one. A DIR without .done is a leftover of
# the layout before this one (built in place) and is replaced.
define cache_publish
@touch $(call cache_partial,$(1))/.done
@if [ -d $(1) ] && [ ! -e $(1)/.done ]; then rm -rf $(1); fi; \
  if mv -T $(call cache_partial,$(1)) $(1) 2>/dev/null; then :; \
  elif [ -e $(1)/.done ]; then \
    echo "$(1): another run published it first; using that one"; \
    rm -rf $(call cache_partial,$(1)); \
  else echo "could not move $(call cache_partial,$(1)) to $(1)" >&2; exit 1; fi
endef
