/* embed.cl - (being written) */
