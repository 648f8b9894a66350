"""The ``gpu/wgsl/integer`` path: the ``wai-ops/1`` integer operator set as WebGPU compute
kernels (WGSL, ``i32``/``u32`` only) run through wgpu-py, bit for bit the interpreter's result.

Each kernel is described by a JSON descriptor (``descriptors/``, validated against
``descriptor.schema.json``) and rendered from a Jinja2 template (``templates/``). Importing this
package imports neither wgpu nor the templates: :mod:`.runner` loads wgpu on first use."""
