11059 bash 1
