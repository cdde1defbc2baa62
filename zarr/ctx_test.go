package zarr

import "context"

// bg is the context of test calls that are not about cancellation.
var bg = context.Background()
