#!/bin/sh
# records this rank's pid in ./pid.RANK, then becomes the command
echo $$ > pid.${OMPI_COMM_WORLD_RANK:-x}
exec "$@"
